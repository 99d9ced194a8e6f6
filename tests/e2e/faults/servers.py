"""Redis and Neo4j instances of the harness's own, on free ports, to be SIGKILLed and restarted.

Never the shared test services. Redis runs as docker-compose.yml runs it (`--appendonly yes
--appendfsync everysec`); Neo4j is started by deploy/services.sh with its own state folder and
ports (the script finds our Redis already answering on its Redis port and leaves it alone).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.distributed import ROOT

SERVICES = ROOT / "deploy" / "services.sh"


EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_port() -> int:
    """A free port below the kernel's ephemeral range. A server killed and restarted on its
    port must find it free again; an ephemeral port may meanwhile be any client's own end."""
    ephemeral = int(EPHEMERAL.read_text().split()[0]) if EPHEMERAL.exists() else 32768
    for _ in range(1000):
        port = random.randrange(10_000, max(ephemeral, 10_001))
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between 10000 and {ephemeral}")


def _pid(path: Path) -> int:
    return int(path.read_text().strip())


class OwnRedis:
    """A redis-server with append-only persistence (fsync every second), restartable in place."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        self.folder, self.port = folder, port or free_port()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.pid_file = folder / "redis.pid"

    def start(self) -> None:
        subprocess.run(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--daemonize",
                "yes",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--dir",
                str(self.folder),
                "--pidfile",
                str(self.pid_file),
                "--logfile",
                str(self.folder / "redis.log"),
            ],
            check=True,
        )
        self._wait(up=True)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final fsync (up to a second of writes may be lost)."""
        pid = _pid(self.pid_file)
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid)
        self.pid_file.unlink(missing_ok=True)

    def restart(self) -> None:
        self.start()

    def stop(self) -> None:
        if self.pid_file.exists():
            subprocess.run(
                ["redis-cli", "-p", str(self.port), "shutdown", "nosave"],
                check=False,
                capture_output=True,
            )
            self._wait(up=False)

    def _wait(self, up: bool, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            reply = subprocess.run(
                ["redis-cli", "-p", str(self.port), "ping"], capture_output=True, text=True
            ).stdout.strip()
            # LOADING while the AOF is replayed: not up yet.
            if (reply == "PONG") == up:
                return
            time.sleep(0.1)
        log = self.folder / "redis.log"
        tail = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
        state = "up" if up else "down"
        raise RuntimeError(f"redis on port {self.port} did not come {state}: {tail}")


class OwnNeo4j:
    """Neo4j 5.26 started by deploy/services.sh in its own folder, on its own port."""

    def __init__(self, folder: Path, redis_port: int, heap: str = "512m") -> None:
        self.folder, self.port = folder, free_port()
        self.uri = f"bolt://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "COGMILL_SERVICES_DIR": str(folder),
            "COGMILL_TEST_REDIS_PORT": str(redis_port),  # ours, already up: left alone
            "COGMILL_TEST_NEO4J_PORT": str(self.port),
            "COGMILL_TEST_NEO4J_HTTP_PORT": "0",  # Bolt only: no second port to find free
            "COGMILL_NEO4J_HEAP": heap,
            "COGMILL_SERVICES_TIMEOUT": "300",
        }

    def _services(self, command: str) -> None:
        done = subprocess.run(
            [str(SERVICES), command], env=self.env, cwd=ROOT, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"services.sh {command} failed: {done.stderr[-2000:]}")

    def start(self) -> None:
        self._services("start")

    def kill(self) -> None:
        pid = _pid(self.folder / "neo4j.pid")
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid)
        # The JVM's main thread can be a zombie while its other threads still hold the port.
        deadline = time.monotonic() + 60
        while _answers(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"port {self.port} still answers 60s after SIGKILL of {pid}")
            time.sleep(0.1)

    def restart(self) -> None:
        self.start()

    def stop(self) -> None:
        self._services("stop")


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _wait_gone(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return  # a zombie: dead, waiting for its parent
        time.sleep(0.05)
    raise RuntimeError(f"process {pid} still alive {timeout}s after SIGKILL")
