"""The figures of a load run: per-route latencies, the server's RSS over time and CPU from
/proc, and the jobs' throughput.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.loadtest.traffic import Recorder


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (KiB) and Threads of a live process, from /proc."""
    wanted = {"VmRSS", "VmHWM", "Threads"}
    status = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            status[key] = int(value.split()[0])
    return status


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def job_figures(job: dict[str, Any]) -> dict[str, Any]:
    """Status, chunks and chunks/s from the job's own timestamps (created to finished)."""
    started = datetime.fromisoformat(job["created_at"])
    ended = datetime.fromisoformat(job["finished_at"])
    seconds = (ended - started).total_seconds()
    chunks = job["counts"].get("chunks", 0)
    return {
        "status": job["status"],
        "errors": len(job["errors"]),
        "documents": job["counts"].get("documents", 0),
        "chunks": chunks,
        "seconds": round(seconds, 1),
        "chunks_per_s": round(chunks / seconds, 2) if seconds else None,
    }


class RssSampler(threading.Thread):
    """The server's RSS (MiB), thread count and CPU seconds every second until stopped."""

    def __init__(self, pid: int, limit_s: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.limit = pid, int(limit_s) + 1
        self.stop = threading.Event()
        self.samples: list[tuple[float, float, int]] = []  # (seconds, RSS MiB, threads)
        self.started = time.monotonic()

    def run(self) -> None:
        for _ in range(self.limit):
            status = proc_status(self.pid)
            at = time.monotonic() - self.started
            self.samples.append((at, status["VmRSS"] / 1024, status["Threads"]))
            if self.stop.wait(1.0):
                return


def slope_per_min(samples: list[tuple[float, float, int]]) -> float:
    """The least-squares slope of RSS over time, MiB per minute (0 for under 3 samples)."""
    if len(samples) < 3:
        return 0.0
    return round(float(np.polyfit([s[0] for s in samples], [s[1] for s in samples], 1)[0]) * 60, 2)


def rss_figures(samples: list[tuple[float, float, int]], warmup_s: float) -> dict[str, Any]:
    """Start, peak, end; after warm-up the baseline, growth and slope, and the slope of the
    second half alone (a leak keeps its slope; memory settling after warm-up loses it)."""
    after = [s for s in samples if s[0] >= warmup_s] or samples[-1:]
    end = float(np.mean([s[1] for s in after[-3:]]))
    return {
        "samples": len(samples),
        "start_mib": round(samples[0][1], 1),
        "warm_mib": round(after[0][1], 1),
        "peak_mib": round(max(s[1] for s in samples), 1),
        "end_mib": round(end, 1),
        "growth_after_warmup": round(end / after[0][1] - 1, 3),
        "slope_mib_per_min": slope_per_min(after),
        "slope_second_half_mib_per_min": slope_per_min(after[len(after) // 2 :]),
        "threads_warm_end": [after[0][2], samples[-1][2]],
        "every_10s_mib": [round(s[1], 1) for s in samples[::10]],
    }


def route_figures(recorder: Recorder, seconds: float) -> dict[str, dict[str, float]]:
    """Requests, requests/s and p50/p95/p99 (ms) per route, and for all of them together."""
    by_route: dict[str, list[float]] = {}
    for sample in recorder.samples:
        by_route.setdefault(sample.route, []).append(sample.seconds)
    by_route["all"] = [s.seconds for s in recorder.samples]
    figures = {}
    for route, latencies in by_route.items():
        p50, p95, p99 = np.percentile(np.array(latencies) * 1000, [50, 95, 99])
        figures[route] = {
            "n": len(latencies),
            "rps": round(len(latencies) / seconds, 2),
            "p50_ms": round(float(p50), 1),
            "p95_ms": round(float(p95), 1),
            "p99_ms": round(float(p99), 1),
        }
    return figures


def jobs_figures(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """The jobs run under load: how many, their statuses, totals and chunks/s (the first
    job's too: it started with the clients, as the undisturbed job started alone)."""
    figures = [job_figures(job) for job in jobs]
    rates = [f["chunks_per_s"] for f in figures if f["chunks_per_s"]] or [0.0]
    return {
        "jobs": len(figures),
        "statuses": dict(Counter(f["status"] for f in figures)),
        "document_errors": sum(f["errors"] for f in figures),
        "documents": sum(f["documents"] for f in figures),
        "chunks": sum(f["chunks"] for f in figures),
        "chunks_per_s_median": round(statistics.median(rates), 2),
        "chunks_per_s_min_max": [min(rates), max(rates)],
        "first": figures[0] if figures else None,
    }
