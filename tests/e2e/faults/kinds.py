"""The fault kinds, each a Scenario: worker kills, server kills, LLM faults and
hangs, a full disk for the blob store, a kill during a re-cognify and during a delete."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import neo4j
import redis

from core.llm.cache import KEY_PREFIX
from core.models.jobs import Job, JobStatus
from tests.backends import add_files, finished
from tests.distributed import ROOT, Worker
from tests.e2e.faults import stores
from tests.e2e.faults.injectors import ServerKiller, WorkerKiller
from tests.e2e.faults.scenario import Context, Scenario, Tick
from workers.orchestration import cognify

LLM_TIMEOUT_S = "2.5"  # the client's timeout in the LLM scenarios: ~8x the stand-in's latency
HANG_S = 60.0  # a hanging request: far past the client's timeout
# Per request where workers are killed: extraction and embedding steps then run long enough
# for each kill to find a step running before the job ends.
SLOW_MODELS = {"latency_ms": 2000.0, "embedding_latency_ms": 500.0}


def serves(queue: str) -> Callable[[Worker], bool]:
    return lambda worker: queue in worker.queues.split(",")


def kill_workers(
    count: int,
    *,
    targets: tuple[Callable[[Worker], bool], ...] = (lambda worker: True,),
    child_only: bool = False,
    gap: tuple[float, float] = (0.3, 2.0),
) -> Callable[[Context], Tick]:
    """SIGKILL `count` busy workers, the i-th one that `targets[i % len(targets)]` accepts."""

    def chaos(ctx: Context) -> Tick:
        return WorkerKiller(ctx.workers, ctx.tracker, count, ctx.rng, gap, targets, child_only)

    return chaos


def worker_kills(pool: str) -> Scenario:
    """Two workers of one pool, one per queue: the llm queue's killed while it extracts, then
    the ingest queue's while it writes. Each kill waits for its step with no bound but the
    job's end, and the step comes: extractions run first (seconds each, on the slow models),
    and the killed batch's writes run after it is taken up again."""
    return Scenario(
        f"SIGKILL {pool} workers, llm then ingest",
        [(pool, "llm", 2), (pool, "ingest", 2)],
        llm_faults=dict(SLOW_MODELS),
        chaos=kill_workers(2, targets=(serves("llm"), serves("ingest"))),
    )


def server_kills(name: str, server: object, count: int) -> Scenario:
    """SIGKILL a server of the run's own stack `count` times while steps run, restart it."""

    def chaos(ctx: Context) -> Tick:
        kill, restart = server.kill, server.restart  # type: ignore[attr-defined]
        return ServerKiller(name, kill, restart, ctx.tracker, ctx.workers, count, ctx.rng)

    # The slow models as for worker kills: on a quiet machine a job at the default latency
    # could end before the first kill (2-8 s in) found a step running.
    return Scenario(
        f"SIGKILL {name} x{count}", llm_faults=dict(SLOW_MODELS), chaos=chaos, timeout=600
    )


def llm_faults(rate: float = 0.2, *, scheduled: bool = False) -> Scenario:
    """`rate` of LLM and embedding requests fail, spread over 429, 500, timeout (a request
    hanging past the client's timeout) and malformed JSON: drawn at random per text and
    attempt, or `scheduled` (every 1/rate-th request, the kinds in turn: exactly that share,
    every kind, whatever the texts)."""
    faults: dict[str, object] = {"retry_after": 0.5, "hang_seconds": HANG_S}
    if scheduled:
        faults["fault_every"] = round(1 / rate)
    else:
        faults |= {f"rate_{kind}": rate / 4 for kind in ("429", "500", "timeout", "malformed")}
    settings = {"llm_timeout_seconds": LLM_TIMEOUT_S, "llm_max_attempts": "10"}
    how = "scheduled" if scheduled else "random"
    return Scenario(f"LLM faults {rate:.0%} {how}", llm_faults=faults, settings=settings)


def llm_hang(share: float = 1.0) -> Scenario:
    """The LLM hangs far past the client's timeout: on every text's first request (`share`
    1), or on that share of all requests (drawn per text and attempt)."""
    faults: dict[str, object] = {"hang_seconds": HANG_S}
    if share >= 1:
        faults |= {"fail_first": 1, "fail_kind": "timeout"}
    else:
        faults |= {"rate_timeout": share}
    return Scenario(
        f"LLM hangs past the timeout ({share:.0%} of requests)",
        llm_faults=faults,
        settings={"llm_timeout_seconds": LLM_TIMEOUT_S},
    )


def recognify_with_kills(count: int) -> Scenario:
    """A clean job, then `cognify(mode="all")` with an empty LLM cache, the slow models and
    workers killed (the killer acts from the second job on: it is ticked while that runs)."""

    def job(ctx: Context, dataset: str) -> Job:
        first = finished(
            ctx.runtime, cognify(ctx.runtime, dataset), 300, interval=0.2, outages=True
        )
        assert first.status is JobStatus.SUCCEEDED, first
        _clear_llm_cache(ctx)
        ctx.llm.configure(**SLOW_MODELS)
        return cognify(ctx.runtime, dataset, mode="all")

    return Scenario(f"SIGKILL worker x{count} during re-cognify", chaos=kill_workers(count),
                    job=job)  # fmt: skip


def _clear_llm_cache(ctx: Context) -> None:
    """Drop the run's cached LLM replies, so the re-cognify calls the LLM under the kills."""
    prefix = ctx.env["COGMILL_REDIS_PREFIX"] + KEY_PREFIX
    with redis.Redis.from_url(ctx.env["COGMILL_REDIS_URL"]) as client:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)


def delete_with_kill(attempts: int = 5) -> Scenario:
    """A clean job; `cogmill delete` SIGKILLed half way (checked: part of the dataset gone,
    part left); the delete run again must leave nothing; then the corpus again, compared."""

    def job(ctx: Context, dataset: str) -> Job:
        runtime = ctx.runtime
        for attempt in range(attempts):
            if attempt:  # the last delete ended before a look caught it half way
                add_files(runtime, dataset, ctx.corpus)
            job = cognify(runtime, dataset, mode="all")
            done = finished(runtime, job, 300, interval=0.2, outages=True)
            assert done.status is JobStatus.SUCCEEDED, done
            if _delete_killed_half_way(ctx, dataset):
                ctx.notes["delete_attempts"] = attempt + 1
                break
            assert attempt + 1 < attempts, f"no kill landed inside a delete in {attempts} tries"
        again = _cli(ctx, "delete", "--dataset", dataset)
        assert again.returncode == 0, again.stderr
        prefix = ctx.env["COGMILL_REDIS_PREFIX"]
        left = stores.take(ctx.env["COGMILL_NEO4J_URI"], ctx.env["COGMILL_REDIS_URL"], prefix,
                           dataset, None)  # fmt: skip
        assert stores.is_empty(left), f"a delete after a killed delete left {left.sizes()}"
        blobs = sorted(p.name for p in (runtime.settings.home / "blobs" / dataset).glob("*"))
        ctx.notes["blobs_left_after_repeated_delete"] = len(blobs)
        assert not blobs, f"a delete after a killed delete left {len(blobs)} stored files"
        report = add_files(runtime, dataset, ctx.corpus)
        assert report.added and not report.rejected, report
        return cognify(runtime, dataset)

    return Scenario("SIGKILL during a dataset delete", job=job, timeout=600)


def _cli(
    ctx: Context, *args: str, wait: bool = True
) -> subprocess.CompletedProcess | subprocess.Popen:
    env = {**os.environ, **ctx.env, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "api.cli", *args]
    if wait:
        return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    return subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _sizes(ctx: Context, dataset: str) -> tuple[int, int, int, int]:
    """(stored files, graph nodes, vectors, postings keys) of the dataset, counted directly."""
    files = sum(1 for _ in (Path(ctx.env["COGMILL_HOME"]) / "blobs" / dataset).glob("*"))
    with neo4j.GraphDatabase.driver(ctx.env["COGMILL_NEO4J_URI"]) as driver:
        records, _, _ = driver.execute_query(
            "RETURN COUNT { MATCH (n:Node {dataset: $d}) } AS nodes, "
            f"COUNT {{ MATCH (v:{stores.VECTOR_LABEL} {{dataset: $d}}) }} AS vectors",
            d=dataset,
        )
    prefix = ctx.env["COGMILL_REDIS_PREFIX"]
    with redis.Redis.from_url(ctx.env["COGMILL_REDIS_URL"]) as client:
        postings = sum(1 for _ in client.scan_iter(match=f"{prefix}lex:{dataset}:*", count=1000))
    return files, records[0]["nodes"], records[0]["vectors"], postings


def _delete_killed_half_way(ctx: Context, dataset: str) -> bool:
    """Run `cogmill delete`, freezing it (SIGSTOP) now and then to look; SIGKILL it when the
    dataset is part gone, part left. False when the delete ended before a look caught it."""
    full = _sizes(ctx, dataset)
    assert all(full), f"nothing to delete: {full}"
    proc = _cli(ctx, "delete", "--dataset", dataset, wait=False)
    assert isinstance(proc, subprocess.Popen)
    try:
        while proc.poll() is None:
            time.sleep(ctx.rng.uniform(0.0, 0.05))
            proc.send_signal(signal.SIGSTOP)
            now = _sizes(ctx, dataset)
            if now != full and any(now):
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
                ctx.notes.setdefault("deletes_killed", []).append({"before": full, "at_kill": now})
                return True
            proc.send_signal(signal.SIGCONT)
        return False
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.wait(60)


class FullDisk:
    """The blob store on a small tmpfs filled up: `add` must fail clearly and leave nothing
    half-stored; the job on what was added still runs; with space back the rest is added."""

    def __init__(self, free_pages: int) -> None:
        self.free_pages = free_pages
        self.mounted: Path | None = None
        self.errors: list[str] = []

    @staticmethod
    def available() -> str | None:
        """None when a tmpfs can be mounted here, else why not."""
        if os.geteuid() != 0:
            return "mounting a tmpfs needs root"
        probe = Path(f"/tmp/cogmill-tmpfs-probe-{os.getpid()}")
        probe.mkdir(exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode != 0:
            probe.rmdir()
            return f"mount -t tmpfs failed: {done.stderr.strip()}"
        subprocess.run(["umount", str(probe)], check=True)
        probe.rmdir()
        return None

    def add(self, ctx: Context, dataset: str, corpus: list[Path]) -> None:
        blobs = ctx.runtime.settings.home / "blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(blobs)], check=True)
        self.mounted = blobs
        filler = blobs / "filler"
        filler.mkdir()
        pages = 0
        try:
            while True:  # fill the disk a page at a time, then give `free_pages` back
                (filler / str(pages)).write_bytes(b"x" * 4096)
                pages += 1
        except OSError as err:
            assert err.errno == errno.ENOSPC, err
        for page in range(pages - self.free_pages, pages + 1):
            (filler / str(page)).unlink(missing_ok=True)
        added, failed = self._add_each(ctx, dataset, corpus)
        assert added and failed, f"the full disk took {len(added)} of {len(corpus)} documents"
        ctx.notes["disk_full"] = {"added": len(added), "refused": len(failed),
                                  "error": self.errors[0]}  # fmt: skip
        first = finished(
            ctx.runtime, cognify(ctx.runtime, dataset), 300, interval=0.2, outages=True
        )
        assert first.status is JobStatus.SUCCEEDED and first.counts["documents"] == len(added)
        for path in filler.iterdir():
            path.unlink()
        report = add_files(ctx.runtime, dataset, corpus)
        assert sorted(report.added) == sorted(p.name for p in failed), report

    def _add_each(self, ctx: Context, dataset: str, corpus: list[Path]) -> tuple[list, list]:
        added, failed = [], []
        for path in corpus:
            try:
                add_files(ctx.runtime, dataset, [path])
                added.append(path)
            except OSError as err:
                assert err.errno == errno.ENOSPC, err
                self.errors.append(str(err))
                failed.append(path)
        docs = {d.name for d in ctx.runtime.catalog.documents(dataset)}
        assert docs == {p.name for p in added}, "a failed add left a document behind"
        leftovers = [p.name for p in ctx.runtime.settings.home.glob("blobs/**/.tmp-*")]
        assert not leftovers, f"a failed add left temporary files: {leftovers}"
        return added, failed

    def close(self) -> None:
        if self.mounted is not None:
            subprocess.run(["umount", "-l", str(self.mounted)], check=False)
            self.mounted = None


def disk_full(disk: FullDisk) -> Scenario:
    return Scenario("blob store disk full", add=disk.add, compare_job=False)
