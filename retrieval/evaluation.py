"""`cogmill eval`: recall@k of gold passages on the multi-hop benches (MuSiQue, HotpotQA).

Each passage of a bench corpus becomes one document (`00042.txt` holds passage 42 as
`title\\ntext`), is cognified with the offline extractor and the local embedder (no LLM, so
every search type is compared on the same graph and vectors), and every question is searched
with each type. A passage is gold for a question when its title is one of the question's
supporting titles (the benches' own definition, see their README).

Recall@k of a question = the fraction of its gold titles among the titles of the top-k
distinct documents of the ranked results (documents deduplicated in rank order); the figure
is the mean over questions.

`AUTO` is what `search` without a type returns: the query router picks the type for each
question. Splits: `tune` holds the questions at even positions of a bench file (0, 2, 4...),
`test` those at odd positions; router weights and retriever parameters are tuned on `tune`
only, so `test` figures are held out (HotpotQA is tuned on neither).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import InvalidInput
from retrieval.base import RetrievalContext
from retrieval.models import SearchResult, SearchType
from retrieval.registry import RETRIEVERS
from retrieval.search import search

BENCHES = ("musique", "hotpotqa")
SPLITS = ("all", "tune", "test")
KS = (2, 5, 10)
AUTO = "AUTO"  # the routed search (`search` without a type), as an eval row
EvalType = SearchType | str  # a search type, or AUTO
EVAL_TYPES: tuple[EvalType, ...] = (
    SearchType.CHUNKS,
    SearchType.GRAPH_COMPLETION,
    SearchType.HYBRID_COMPLETION,
    SearchType.GRAPH_PPR,
    AUTO,
)
# Results asked of a retriever per question: enough distinct documents for the largest k even
# when several results (triplets) come from one document.
FETCH_TOP_K = 100
Progress = Callable[[str], None]


class BenchDataError(InvalidInput):
    """A bench file is missing or not in the expected format."""

    code = "invalid_bench_data"


@dataclass(frozen=True)
class Passage:
    title: str
    text: str


@dataclass(frozen=True)
class Question:
    text: str
    gold: frozenset[str]  # titles of the supporting passages


@dataclass
class Bench:
    name: str
    passages: list[Passage]
    questions: list[Question]

    def file_name(self, index: int) -> str:
        """The document name passage `index` is added under."""
        return f"{index:05d}.txt"

    def titles_by_name(self) -> dict[str, str]:
        return {self.file_name(i): p.title for i, p in enumerate(self.passages)}

    def split(self, name: str) -> Bench:
        """The `tune` (even positions) or `test` (odd positions) questions, or `all`."""
        if name not in SPLITS:
            raise BenchDataError(f"unknown split {name!r}; use one of {', '.join(SPLITS)}")
        if name == "all":
            return self
        parity = 0 if name == "tune" else 1
        return Bench(self.name, self.passages, self.questions[parity::2])

    def limited(self, limit: int) -> Bench:
        """The first `limit` passages and the questions whose gold passages are all among them."""
        if limit <= 0 or limit >= len(self.passages):
            return self
        passages = self.passages[:limit]
        titles = {p.title for p in passages}
        questions = [q for q in self.questions if q.gold <= titles]
        return Bench(self.name, passages, questions)


def default_data_dir() -> Path:
    """`../shared/bench/data` beside the repository (override with `--data`)."""
    return Path(__file__).resolve().parents[1].parent / "shared" / "bench" / "data"


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise BenchDataError(
            f"bench file {path} not found; pass --data DIR with the folder holding "
            "<bench>_train_corpus.json and <bench>_train.json"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise BenchDataError(f"bench file {path} is not valid UTF-8 JSON: {err}") from err


def _passages(name: str, corpus: Any, path: Path) -> list[Passage]:
    try:
        if name == "hotpotqa":  # {title: [sentence, ...]}
            return [Passage(str(t), "".join(map(str, s)).strip()) for t, s in corpus.items()]
        return [Passage(str(p["title"]), str(p["text"])) for p in corpus]  # [{title, text}]
    except (AttributeError, KeyError, TypeError) as err:
        shape = (
            "an object of title -> sentences" if name == "hotpotqa" else "a list of {title, text}"
        )
        raise BenchDataError(f"{path}: expected {shape} ({err!r})") from err


def _gold(name: str, item: dict[str, Any]) -> frozenset[str]:
    if name == "hotpotqa":
        return frozenset(str(fact[0]) for fact in item["supporting_facts"])
    return frozenset(str(p["title"]) for p in item["paragraphs"] if p.get("is_supporting"))


def load_bench(name: str, data_dir: Path) -> Bench:
    """A bench's passages and questions. Raises BenchDataError on missing or malformed files."""
    if name not in BENCHES:
        raise BenchDataError(f"unknown bench {name!r}; use one of {', '.join(BENCHES)}")
    corpus_path = data_dir / f"{name}_train_corpus.json"
    questions_path = data_dir / f"{name}_train.json"
    passages = _passages(name, _read_json(corpus_path), corpus_path)
    raw = _read_json(questions_path)
    try:
        questions = [Question(str(item["question"]), _gold(name, item)) for item in raw]
    except (KeyError, TypeError, IndexError) as err:
        fields = "supporting_facts" if name == "hotpotqa" else "paragraphs[].is_supporting"
        raise BenchDataError(
            f"{questions_path}: expected a list of questions with `question` and `{fields}` "
            f"({err!r})"
        ) from err
    titles = {p.title for p in passages}
    for question in questions:
        if not question.gold:
            raise BenchDataError(
                f"{questions_path}: question {question.text!r} has no gold passage"
            )
        missing = question.gold - titles
        if missing:
            raise BenchDataError(
                f"{questions_path}: gold passage(s) {sorted(missing)} of question "
                f"{question.text!r} are not in {corpus_path.name}"
            )
    return Bench(name, passages, questions)


def write_documents(bench: Bench, folder: Path) -> list[tuple[Path, str]]:
    """One text file per passage (`title\\ntext`), with the name it is added under."""
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for index, passage in enumerate(bench.passages):
        path = folder / bench.file_name(index)
        path.write_text(f"{passage.title}\n{passage.text}", encoding="utf-8")
        files.append((path, bench.file_name(index)))
    return files


def ranked_titles(results: Sequence[SearchResult], titles: dict[str, str]) -> list[str]:
    """Titles of the distinct documents behind the results, in rank order."""
    seen: dict[str, str] = {}
    for result in results:
        for source in result.sources:
            if source.document_id not in seen:
                seen[source.document_id] = titles.get(source.document_name, "")
    return list(seen.values())


def recall_at(ranked: Sequence[str], gold: frozenset[str], k: int) -> float:
    """Fraction of the gold titles among the first k ranked document titles."""
    return len(gold & set(ranked[:k])) / len(gold)


@dataclass
class TypeFigures:
    recall: dict[int, float]
    p50_ms: float
    p95_ms: float
    routed: dict[str, int] = field(default_factory=dict)  # AUTO: the types the router picked

    def as_json(self) -> dict[str, float]:
        return {f"recall@{k}": round(value, 4) for k, value in self.recall.items()}


def eval_type(name: str) -> EvalType:
    """A search type or AUTO from its name (any case). Raises ValueError naming the choices."""
    upper = name.strip().upper()
    if upper == AUTO:
        return AUTO
    if upper in SearchType.__members__ and SearchType(upper) in RETRIEVERS:
        return SearchType(upper)
    choices = ", ".join([*(kind.value for kind in RETRIEVERS), AUTO])
    raise InvalidInput(f"search type {name!r} cannot be evaluated; use one of {choices}")


class RoutedRetriever:
    """AUTO: what `search` without a type returns (the router's choice per question)."""

    def __init__(self, ctx: RetrievalContext) -> None:
        self.ctx = ctx
        self.chosen: dict[str, int] = {}  # how often each type was picked

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        response = search(self.ctx, query, datasets, None, top_k)
        kind = response.search_type.value
        self.chosen[kind] = self.chosen.get(kind, 0) + 1
        return response.results


def evaluate(
    ctx: RetrievalContext,
    bench: Bench,
    dataset: str,
    types: Sequence[EvalType],
    ks: Sequence[int] = KS,
    fetch: int = FETCH_TOP_K,
) -> dict[EvalType, TypeFigures]:
    """Recall@k of every type over the bench's questions, and the context latency it took."""
    titles = bench.titles_by_name()
    figures: dict[EvalType, TypeFigures] = {}
    for search_type in types:
        retriever: Any
        if search_type == AUTO:
            retriever = RoutedRetriever(ctx)
        elif search_type in RETRIEVERS:
            retriever = RETRIEVERS.create(SearchType(search_type), ctx)
        else:
            raise InvalidInput(f"search type {search_type} is not available for eval yet")
        retriever.get_context(bench.questions[0].text, [dataset], fetch)  # warm caches
        getattr(retriever, "chosen", {}).clear()
        sums = dict.fromkeys(ks, 0.0)
        times = []
        for question in bench.questions:
            started = time.perf_counter()
            results = retriever.get_context(question.text, [dataset], fetch)
            times.append((time.perf_counter() - started) * 1000)
            ranked = ranked_titles(results, titles)
            for k in ks:
                sums[k] += recall_at(ranked, question.gold, k)
        count = len(bench.questions)
        figures[search_type] = TypeFigures(
            recall={k: sums[k] / count for k in ks},
            p50_ms=statistics.median(times),
            p95_ms=percentile(times, 0.95),
            routed=dict(getattr(retriever, "chosen", {})),
        )
    return figures


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile `q` (0..1) of the values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
