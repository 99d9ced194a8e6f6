"""CPU time of the processes a bench runs beside: by pid, by listening port, as a tree.

Linux /proc only: utime + stime of a process and of its live descendants (a worker's pool
children), in seconds. The stand-in LLM runs as a process of its own (`StandIn`) so that its
CPU is not the driver's.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2 :].split()  # fields from the 3rd (state) on


def cpu_s(pid: int) -> float:
    """utime + stime of one process, 0 once it is gone."""
    try:
        fields = _stat(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float:
    """Resident memory of one process now (VmRSS), 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    line = next((line for line in status.splitlines() if line.startswith("VmRSS:")), "")
    return int(line.split()[1]) / 1024 if line else 0.0


def rss_trend(samples: list[tuple[float, float]]) -> dict[str, float]:
    """First, peak and last of (seconds, MiB) samples, and the least-squares slope of the
    second half in MiB per minute: what is still growing once a run has warmed up."""
    half = samples[len(samples) // 2 :]
    slope = 0.0
    if len(half) > 2:
        mean_t = sum(t for t, _ in half) / len(half)
        mean_m = sum(m for _, m in half) / len(half)
        spread = sum((t - mean_t) ** 2 for t, _ in half)
        if spread:
            slope = 60 * sum((t - mean_t) * (m - mean_m) for t, m in half) / spread
    values = [m for _, m in samples]
    return {
        "first": round(values[0]),
        "peak": round(max(values)),
        "last": round(values[-1]),
        "slope_mib_per_min": round(slope, 1),
    }


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                children.setdefault(int(_stat(int(entry.name))[1]), []).append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError, ValueError):
                continue
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_cpu_s(pid: int) -> float:
    return cpu_s(pid) + sum(cpu_s(child) for child in descendants(pid))


def listening_pid(port: int) -> int | None:
    """The process listening on a local TCP port (one of this user's), else None."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(cols[9])
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(entry.name)
        except (PermissionError, FileNotFoundError, ProcessLookupError):
            continue
    return None


def load_average() -> float:
    """The 1-minute load average (the machine's, every user's processes)."""
    return float(Path("/proc/loadavg").read_text().split()[0])


@dataclass(frozen=True)
class Snapshot:
    """CPU seconds so far per named process, the wall clock and the load average, at once."""

    cpu: dict[str, float]
    at: float
    load: float

    def since(self, earlier: Snapshot) -> Window:
        cpu = {name: self.cpu[name] - earlier.cpu[name] for name in self.cpu}
        return Window(cpu, self.at - earlier.at, (earlier.load, self.load))


@dataclass(frozen=True)
class Window:
    cpu: dict[str, float]  # seconds per process over the window
    wall_s: float
    load: tuple[float, float]  # 1-minute load average at its start and end


def snapshot(processes: dict[str, Callable[[], float]]) -> Snapshot:
    """`processes`: a name -> a reading of its CPU seconds so far (e.g. `tree_cpu_s(pid)`)."""
    return Snapshot(
        {n: read() for n, read in processes.items()}, time.perf_counter(), load_average()
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class StandIn:
    """tests/llm_server.py in a process of its own; `calls()` and `stats()` over HTTP."""

    def __init__(self, root: Path, latency_ms: int, embedding_dim: int, log: Path) -> None:
        port = free_port()
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._stats_url = f"http://127.0.0.1:{port}/stats"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.llm_server",
                "--port",
                str(port),
                "--latency-ms",
                str(latency_ms),
                "--embedding-dim",
                str(embedding_dim),
            ],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                # Embeddings instant whatever the chat latency (the command line has no flag).
                self._post("/control", {"embedding_latency_ms": 0})
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the stand-in LLM did not start: see {log}") from None
                time.sleep(0.2)

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self._stats_url, timeout=30) as reply:
            return dict(json.load(reply))

    def _post(self, path: str, body: dict[str, Any]) -> None:
        request = urllib.request.Request(
            self._stats_url.removesuffix("/stats") + path,
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            reply.read()

    def calls(self, path: str = "/v1/chat/completions") -> int:
        return int(self.stats()["requests"].get(path, 0))

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
