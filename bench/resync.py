"""Re-sync bench: a folder of MuSiQue passages synced once, then again unchanged, touched, and
with 1% of its files edited (embedded stores by default; run on demand, prints figures).

    .venv/bin/python bench/resync.py [--limit N] [--stores embedded|neo4j] [--data DIR]
        [--home DIR] [--json]

The first sync adds and cognifies every file (one file per passage, as `cogmill eval` writes
them). A re-sync of the unchanged folder stats each file against the cursor, reads the
dataset's documents, finds nothing to add or remove and plans nothing; its time is compared
with the first sync's. `touched` sets every file's modification time (each is read and hashed
again, and found unchanged); `edited` changes 1% of the files (only those are cognified). Wall
and CPU seconds are of this whole process (every thread), with the load average.
`--stores neo4j` uses the test services (`eval "$(deploy/services.sh start)"`) with worker
threads in this process, as the integration tests do.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corpora import DATA, pool, write  # noqa: E402

from api.services.sync import sync  # noqa: E402
from core.models.jobs import Job, JobStatus  # noqa: E402
from core.settings import Settings  # noqa: E402
from pipelines.sources.spec import parse_source  # noqa: E402
from runtime import Runtime, use_runtime  # noqa: E402
from workers.celery_app import configure  # noqa: E402
from workers.embedded import EmbeddedWorker  # noqa: E402
from workers.jobs import JobTracker  # noqa: E402
from workers.sync import sync_report  # noqa: E402

DATASET = "resync"


def settings_for(stores: str, home: Path) -> Settings:
    values: dict[str, Any] = {"home": home}
    if stores == "neo4j":
        import common  # noqa: F401 - puts the repository first on sys.path

        redis_url, neo4j_uri = common.services()
        values |= {
            "neo4j_uri": neo4j_uri,
            "vector_store": "neo4j",
            "redis_url": redis_url,
            "redis_prefix": f"bench-resync-{uuid.uuid4().hex[:8]}:",
        }
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def timed(action: Callable[[], Job], rt: Runtime) -> dict[str, Any]:
    """Run a sync to its end: wall and CPU seconds, the report's counts, the job's."""
    wall, cpu = time.perf_counter(), time.process_time()
    job = action()
    tracker = JobTracker(rt.state)
    while not (job := tracker.get(job.id)).status.finished:
        time.sleep(0.02)
    if job.status is not JobStatus.SUCCEEDED:
        raise SystemExit(f"sync job {job.id} ended {job.status.value}: {job.message}")
    report = sync_report(rt.state, job.id) or {}
    return {
        "wall_s": round(time.perf_counter() - wall, 3),
        "cpu_s": round(time.process_time() - cpu, 3),
        "report": report.get("counts", {}),
        "cognified": job.counts.get("documents", 0),
    }


def run(limit: int, stores: str, home: Path, data: Path = DATA) -> dict[str, Any]:
    passages = pool(data)[: limit or 1890]
    folder = home / "passages"
    folder.mkdir(parents=True, exist_ok=True)
    files = write(folder, passages, f"resync-{uuid.uuid4().hex[:6]}")
    settings = settings_for(stores, home / "cogmill")
    rt = Runtime(settings)
    use_runtime(rt)
    spec = parse_source(str(folder))
    results: dict[str, Any] = {"files": len(files), "stores": stores}
    try:
        with EmbeddedWorker(configure(settings), threads=settings.worker_threads):
            results["first"] = timed(lambda: sync(rt, DATASET, spec), rt)
            results["unchanged"] = timed(lambda: sync(rt, DATASET, spec), rt)
            now = time.time()
            for path in files:
                os.utime(path, (now, now))
            time.sleep(2.1)  # past the stat cache's racy window: the next re-sync trusts it
            results["touched"] = timed(lambda: sync(rt, DATASET, spec), rt)
            for path in files[::100]:  # 1%
                path.write_text(path.read_text(encoding="utf-8") + " (edited)", encoding="utf-8")
            results["edited"] = timed(lambda: sync(rt, DATASET, spec), rt)
    finally:
        if stores == "neo4j":
            rt.catalog.remove_dataset(DATASET)
        rt.close()
        use_runtime(None)
    first, again = results["first"]["wall_s"], results["unchanged"]["wall_s"]
    results["ratio_unchanged"] = round(again / first, 4)
    results["load_average"] = os.getloadavg()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="Only the first N passages")
    parser.add_argument("--stores", choices=("embedded", "neo4j"), default="embedded")
    parser.add_argument("--home", type=Path, help="Work here (default: a temporary folder)")
    parser.add_argument("--data", type=Path, default=DATA, help="Folder of the corpus files")
    parser.add_argument("--json", action="store_true", help="Print one JSON object")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="cogmill-resync-"))
    try:
        results = run(args.limit, args.stores, home, args.data)
    finally:
        if args.home is None:
            shutil.rmtree(home, ignore_errors=True)
    if args.json:
        print(json.dumps(results))
        return
    print(f"{results['files']} files, {results['stores']} stores, load {results['load_average']}")
    for name in ("first", "unchanged", "touched", "edited"):
        r = results[name]
        times = f"wall {r['wall_s']:8.2f} s  cpu {r['cpu_s']:8.2f} s"
        print(f"  {name:<10} {times}  cognified {r['cognified']:5d}  {r['report']}")
    print(f"unchanged re-sync / first sync (wall): {results['ratio_unchanged']:.2%}")


if __name__ == "__main__":
    main()
