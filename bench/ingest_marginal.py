"""Marginal ingestion cost: the same new documents into an empty home and into a full one.

    .venv/bin/python bench/ingest_marginal.py --base /tmp/lat_home4 [--new 300] [--skip N]
        [--only empty|full] [--keep DIR]

Takes `--new` passages of `bench/corpora.py`'s pool that the 4x corpus does not hold (from
`--skip`, default 7,560 = 4 x 1,890), adds each as its own document to dataset "musique" and
cognifies them through the Celery pipeline with the embedded stores, twice: (a) into an empty
home, (b) into a copy of `--base` (a home holding the 4x corpus, READY; copied, never written).
For each it prints the thread CPU of every Celery step (task_prerun/postrun, as in
docs/benchmarks.md) and of every call into the stores and the models, timed in the calling thread
(graph, vectors, lexical index, state, embedder, extractor), so a step whose cost grows with
the store shows up as the difference between the two columns. Costs are per new document.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import hashlib
import json
import os
import pstats
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

from celery.signals import task_postrun, task_prerun

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corpora import pool  # noqa: E402
from ingest_musique import ingest  # noqa: E402

from core.models.vocabulary import (  # noqa: E402
    CHUNK_COLLECTION,
    EDGE_TYPE_COLLECTION,
    ENTITY,
    ENTITY_COLLECTION,
    SUMMARY_COLLECTION,
)
from core.settings import Settings  # noqa: E402
from runtime import Runtime, use_runtime  # noqa: E402

COLLECTIONS = (CHUNK_COLLECTION, ENTITY_COLLECTION, SUMMARY_COLLECTION, EDGE_TYPE_COLLECTION)
STORES = ("graph", "vectors", "lexical", "state", "embedder", "extractor")


class Meter:
    """Thread CPU seconds and calls per Celery step and per store method."""

    def __init__(self, profile: tuple[str, ...] = ()) -> None:
        self.profile, self.profiles = profile, []  # steps to run under cProfile; their stats
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._local = threading.local()

    def add(self, key: str, seconds: float) -> None:
        with self._lock:
            self.cpu[key] += seconds
            self.calls[key] += 1

    def wrap(self, label: str, obj: object) -> None:
        """Time every public method of `obj` (on the instance) in the calling thread; a call
        made inside another timed call counts only in the outer one."""
        for name in dir(type(obj)):
            method = getattr(obj, name, None)
            if name.startswith("_") or not callable(method) or name == "close":
                continue
            setattr(obj, name, self._timed(f"{label}.{name}", method))

    def _timed(self, key, method):  # type: ignore[no-untyped-def]
        @functools.wraps(method)
        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            if getattr(self._local, "inside", False):
                return method(*args, **kwargs)
            self._local.inside = True
            started = time.thread_time()
            step = getattr(self._local, "step", "")
            try:
                return method(*args, **kwargs)
            finally:
                self._local.inside = False
                self.add(f"{step}{key}", time.thread_time() - started)
                if key == "embedder.embed":  # texts and characters embedded, per step
                    texts = args[0]
                    self.add(f"{step}embedded texts", len(texts))
                    self.add(f"{step}embedded chars", sum(map(len, texts)))

        return timed

    def connect(self) -> None:
        task_prerun.connect(self._started, weak=False)
        task_postrun.connect(self._ended, weak=False)

    def disconnect(self) -> None:
        task_prerun.disconnect(self._started)
        task_postrun.disconnect(self._ended)

    def _started(self, task=None, **_):  # type: ignore[no-untyped-def]
        name = task.name.removeprefix("cogmill.") if task is not None else "?"
        self._local.step = f"{name}: "
        if name in self.profile:
            self._local.profiler = cProfile.Profile()
            self._local.profiler.enable()
        self._local.task = time.thread_time()

    def _ended(self, task=None, **_):  # type: ignore[no-untyped-def]
        started = getattr(self._local, "task", None)
        self._local.step = ""
        profiler = getattr(self._local, "profiler", None)
        if profiler is not None:
            profiler.disable()
            self._local.profiler = None
            with self._lock:
                self.profiles.append(profiler)
        if started is not None and task is not None:
            self.add(f"step {task.name.removeprefix('cogmill.')}", time.thread_time() - started)


def write_files(passages: list, folder: Path) -> list[tuple[Path, str]]:
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for index, passage in enumerate(passages):
        name = f"marginal_{index:05d}.txt"
        (folder / name).write_text(f"{passage.title}\n{passage.text}", encoding="utf-8")
        files.append((folder / name, name))
    return files


def entities_digest(runtime: Runtime) -> str:
    """A digest of every entity's id and name: equal graphs, equal digests."""
    digest, offset = hashlib.sha1(), 0
    while part := runtime.graph.find_nodes("musique", ENTITY, limit=5000, offset=offset):
        for node in part:
            digest.update(f"{node.id} {node.name}\n".encode())
        offset += len(part)
    return digest.hexdigest()[:12]


def run(home: Path, files: list[tuple[Path, str]], profile: tuple[str, ...]) -> dict:
    runtime = Runtime(Settings(home=home))
    use_runtime(runtime)
    # Open the stores and load the models first: opening a big home is not ingestion.
    runtime.embedder.embed(["warm up"])
    runtime.extractor.extract(["Warm up the parser."])
    before = runtime.graph.count("musique")
    runtime.vectors.count("Entity_name", dataset="musique")
    runtime.lexical.count("musique")
    meter = Meter(profile)
    for label in STORES:
        meter.wrap(label, getattr(runtime, label))
    meter.connect()
    load = os.getloadavg()[0]
    try:
        result = ingest(runtime, files)
    finally:
        meter.disconnect()
    result["cpu"], result["calls"] = dict(meter.cpu), dict(meter.calls)  # before the counts
    result["load_1min"] = [load, os.getloadavg()[0]]
    result["entities_before"] = before.get("Entity", 0)
    result["graph"] = runtime.graph.count("musique")
    result["entities_sha1"] = entities_digest(runtime)
    result["vectors"] = {c: runtime.vectors.count(c, dataset="musique") for c in COLLECTIONS}
    if meter.profiles:
        stats = pstats.Stats(meter.profiles[0])
        for more in meter.profiles[1:]:
            stats.add(more)
        print(f"\n--- {home.name}: cProfile of {', '.join(profile)}, by own time")
        stats.sort_stats("tottime").print_stats(25)
    runtime.close()
    use_runtime(None)
    return result


def table(results: dict[str, dict], documents: int) -> None:
    keys = sorted({k for r in results.values() for k in r["cpu"]})
    names = list(results)
    print(f"\nthread CPU ms per new document ({documents} documents); calls in brackets")
    print(f"{'':44}" + "".join(f"{n:>22}" for n in names))
    for key in sorted(keys, key=lambda k: (not k.startswith("step"), k)):
        if "embedded" in key:
            cells = [f"{r['cpu'].get(key, 0):>21.0f}" for r in results.values()]
            print(f"{key:44}" + "".join(f"{c:>22}" for c in cells))
            continue
        cells = [
            f"{1000 * r['cpu'].get(key, 0) / documents:10.2f} ({r['calls'].get(key, 0):>7})"
            for r in results.values()
        ]
        print(f"{key:44}" + "".join(f"{c:>22}" for c in cells))
    for n, r in results.items():
        print(
            f"{n}: process CPU {r['cpu_s']:.1f} s = {1000 * r['cpu_s'] / documents:.1f} ms/doc, "
            f"add {r['add_s']:.1f} s + cognify {r['cognify_s']:.1f} s wall, status {r['status']}, "
            f"load {r['load_1min'][0]:.1f}-{r['load_1min'][1]:.1f}, "
            f"entities before {r['entities_before']}"
        )
        print(f"  graph {r['graph']}, entities {r['entities_sha1']}, vectors {r['vectors']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="a full home (copied)")
    parser.add_argument("--new", type=int, default=300, help="new documents to add")
    parser.add_argument("--skip", type=int, default=4 * 1890, help="pool passages the base has")
    parser.add_argument("--only", choices=("empty", "full"), help="run one home only")
    parser.add_argument("--profile", nargs="*", default=(), help="steps to run under cProfile")
    parser.add_argument("--json", type=Path, help="write the raw figures here")
    args = parser.parse_args()
    passages = pool()[args.skip : args.skip + args.new]
    if len(passages) < args.new:
        raise SystemExit(f"the pool has only {len(passages)} passages past {args.skip}")
    results = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        files = write_files(passages, Path(tmp) / "docs")
        for kind in ("empty", "full"):
            if args.only and args.only != kind:
                continue
            home = Path(tmp) / kind
            if kind == "full":
                shutil.copytree(args.base, home)
            results[kind] = run(home, files, tuple(args.profile))
            shutil.rmtree(home)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    table(results, args.new)


if __name__ == "__main__":
    main()
