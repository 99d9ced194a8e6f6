"""Facts that change over time: current-fact and as-of accuracy@1, offline (no LLM).

    .venv/bin/python bench/changing_facts.py [--seed 2] [--per-kind 20] [--home DIR] [--json F]

The corpus (bench/changing_facts_corpus.py) is ingested twice in one run, in the same shuffled
order, with the embedded stores and the offline extractor: with supersession
(COGMILL_FACTS_SUPERSESSION on, the default) and without it. Then every question is asked:

- cogmill (routed): no search type, as a user asks; the router sends "who was ... in 2019"
  to the graph search as of that time, and other questions see current facts;
- GRAPH_COMPLETION, as of the question's time when it names one (as `--as-of` would);
- CHUNKS, dense passages (the facts' time plays no part).

accuracy@1 looks at the top result only: its leading fact line (the first of its evidence
that reads "A —relation→ B", GRAPH_PPR's provenance lines left aside) when it has one, else
its passage; it is right when it names the answer and no other value the history ever held.
Tune on one seed (1), report another (2).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.services.add import AddOptions, add_files  # noqa: E402
from bench.changing_facts_corpus import Corpus, Question, generate  # noqa: E402
from core.settings import Settings  # noqa: E402
from retrieval.as_of import fact_time  # noqa: E402
from retrieval.models import SearchResponse, SearchType  # noqa: E402
from retrieval.ppr.paths import CO_MENTION, RELATED  # noqa: E402
from retrieval.search import search  # noqa: E402
from runtime import Runtime, use_runtime  # noqa: E402
from workers.celery_app import configure  # noqa: E402
from workers.embedded import EmbeddedWorker  # noqa: E402
from workers.jobs import JobTracker  # noqa: E402
from workers.orchestration import cognify  # noqa: E402

DATASET = "facts"
ROUTED = "routed"
_ARROW = re.compile(r" —.*→ ")
# GRAPH_PPR's provenance lines say how mass reached a passage, not a fact it holds.
_PATH = re.compile(f"—(?:{CO_MENTION}|{RELATED})→")


def ingest(runtime: Runtime, corpus: Corpus, folder: Path) -> dict[str, float]:
    """Add every document with its date (in the corpus' order) and cognify them."""
    folder.mkdir(parents=True, exist_ok=True)
    started, cpu = time.perf_counter(), time.process_time()
    for doc in corpus.documents:
        path = folder / doc.name
        path.write_text(doc.text, encoding="utf-8")
        options = AddOptions(document_date=doc.day.isoformat())
        add_files(runtime, DATASET, [(doc.name, path)], options)
    with EmbeddedWorker(configure(runtime.settings), threads=runtime.settings.worker_threads):
        job = cognify(runtime, DATASET)
        tracker = JobTracker(runtime.state)
        while not job.status.finished:
            time.sleep(0.1)
            job = tracker.get(job.id)
    if job.status.value != "succeeded" or job.errors:
        sys.exit(f"cognify ended {job.status.value}: {job.errors[:3]}")
    return {"ingest_s": time.perf_counter() - started, "cpu_s": time.process_time() - cpu}


def top_answer(response: SearchResponse) -> str:
    """What the top result says: its leading fact line, else its passage."""
    if not response.results:
        return ""
    top = response.results[0]
    facts = [line for line in top.evidence if _ARROW.search(line) and not _PATH.search(line)]
    return facts[0] if facts else top.text


def correct(question: Question, said: str) -> bool:
    """Names the answer and no other value of the history."""
    others = [c for c in question.candidates if c != question.answer]
    return question.answer in said and not any(c in said for c in others)


def ask(runtime: Runtime, question: Question, how: str) -> bool:
    ctx = runtime.retrieval()
    if how == ROUTED:
        response = search(ctx, question.text, [DATASET], None, 5)
    else:
        when = fact_time(question.text) if how != SearchType.CHUNKS.value else None
        response = search(ctx, question.text, [DATASET], SearchType(how), 5, as_of=when)
    return correct(question, top_answer(response))


def accuracy(runtime: Runtime, questions: list[Question], how: str) -> dict[str, float]:
    """accuracy@1 of the current-fact and the as-of questions, and per kind."""
    right: dict[str, list[bool]] = defaultdict(list)
    for q in questions:
        ok = ask(runtime, q, how)
        mode = "as_of" if q.as_of else "current"
        right[mode].append(ok)
        right[f"{mode}:{q.kind}"].append(ok)
    return {key: round(sum(v) / len(v), 3) for key, v in sorted(right.items())}


def run(corpus: Corpus, home: Path) -> dict[str, dict]:
    """Both settings, ingested and asked in one run."""
    results: dict[str, dict] = {}
    for label, supersession in (("on", True), ("off", False)):
        settings = Settings(home=home / label, facts_supersession=supersession)
        runtime = Runtime(settings)
        use_runtime(runtime)
        runtime.embedder.embed(["warm up"])
        runtime.extractor.extract(["Warm up the parser."])
        figures = ingest(runtime, corpus, home / "docs")
        hows = [ROUTED, SearchType.GRAPH_COMPLETION.value]
        hows += [SearchType.CHUNKS.value] if supersession else []
        for how in hows:
            name = "CHUNKS" if how == SearchType.CHUNKS.value else f"{how} supersession {label}"
            results[name] = {**accuracy(runtime, corpus.questions, how), **figures}
        runtime.close()
        use_runtime(None)
    return results


def table(results: dict[str, dict]) -> str:
    lines = ["| search | current acc@1 | as-of acc@1 |", "|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['current']:.3f} | {r['as_of']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=2, help="corpus seed (tune on 1)")
    parser.add_argument("--per-kind", type=int, default=20, help="histories of each kind")
    parser.add_argument("--home", type=Path, help="keep the stores here (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    corpus = generate(args.seed, args.per_kind)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        results = run(corpus, args.home or Path(tmp))
    current = sum(1 for q in corpus.questions if not q.as_of)
    print(
        f"seed {args.seed}: {len(corpus.documents)} documents, {current} current and "
        f"{len(corpus.questions) - current} as-of questions; load {load:.1f}"
    )
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
