"""CPU seconds and peak RSS of this process and every process it spawns (stdlib, Linux /proc).

Imported by every runner, in cogmill's venv and in the peers' venvs, so it depends on nothing
but the standard library. A runner starts a `TreeCPU` before `add` and reads it after
ingestion: user + system time of this process (all its threads), of children it has waited
for (`children_user/system`, which include their own waited children), and of children still
alive (their whole life if they started inside the window, else the part since the start).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float]:
    """(parent pid, own CPU s, waited children's CPU s) from /proc/PID/stat."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2 :].split()  # fields from the 3rd (state) on
    utime, stime, cutime, cstime = (int(f) / TICK for f in fields[11:15])
    return int(fields[1]), utime + stime, cutime + cstime


def _descendants(root: int) -> dict[int, float]:
    """Own CPU seconds of every live process below `root`."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)], cpu[int(entry)], _ = _stat(int(entry))
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    below, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - below
        below |= frontier
    return {pid: cpu[pid] for pid in below}


def _tree() -> tuple[float, dict[int, float]]:
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    return own, _descendants(os.getpid())


class TreeCPU:
    """CPU seconds of the process tree between `__init__` and `read()`, and the wall time."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.own, self.live = _tree()

    def read(self) -> dict[str, float]:
        own, live = _tree()
        children = sum(cpu - self.live.get(pid, 0.0) for pid, cpu in live.items())
        return {
            "wall_s": time.perf_counter() - self.started,
            "cpu_s": own - self.own + children,
            "live_children": float(len(live)),
        }


def _status_mib(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mib() -> float:
    """This process's peak RSS plus the current RSS of its live children."""
    total = _status_mib(os.getpid(), "VmHWM:")
    for pid in _descendants(os.getpid()):
        try:
            total += _status_mib(pid, "VmRSS:")
        except OSError:
            continue
    return total


class StandIn:
    """The stand-in server's CPU seconds and request counts over a window (it is another
    process: its work answering a system is reported beside that system's own)."""

    def __init__(self, url: str, pid: int) -> None:
        self.url = url.rstrip("/").removesuffix("/v1")
        self.pid = pid
        self.cpu, self.requests = self._read()

    def _read(self) -> tuple[float, dict[str, int]]:
        with urllib.request.urlopen(f"{self.url}/stats", timeout=30) as reply:
            stats = json.load(reply)
        return _stat(self.pid)[1], dict(stats["requests"])

    def read(self) -> dict[str, float]:
        cpu, requests = self._read()
        chat, embed = "/v1/chat/completions", "/v1/embeddings"
        return {
            "cpu_s": cpu - self.cpu,
            "chat_calls": requests.get(chat, 0) - self.requests.get(chat, 0),
            "embedding_calls": requests.get(embed, 0) - self.requests.get(embed, 0),
        }


def latency(times_ms: list[float]) -> dict[str, float]:
    """p50 and p95 (nearest rank, as retrieval.evaluation.percentile) of the timings."""
    ordered = sorted(times_ms)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {"p50_ms": rank(0.5), "p95_ms": rank(0.95), "n": float(len(ordered))}


def runner_args(doc: str | None) -> argparse.Namespace:
    """The command line every runner takes from bench/peers/__main__.py."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    for option in ("--input", "--work", "--standin", "--out"):
        parser.add_argument(option, required=True)
    parser.add_argument("--standin-pid", type=int, required=True)
    return parser.parse_args()
