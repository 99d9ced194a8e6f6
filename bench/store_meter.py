"""How big the stores are: Neo4j's files on disk, Redis's memory and what its keys hold.

Neo4j: the database folder (node, relationship and property stores), its `schema/` folder
(every index: the range, fulltext and vector indexes) and the transaction logs, in bytes,
read from the folders the server names itself (`SHOW SETTINGS`). Redis: `used_memory` from
INFO, and `redis_keys`, a walk of every key under a prefix grouped by the key's kind (its
first segments after the prefix with ids replaced by `*`) with `MEMORY USAGE` summed per
kind, to say what the memory is.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from neo4j import GraphDatabase

SETTINGS = """SHOW SETTINGS YIELD name, value
WHERE name IN ['server.directories.data', 'server.directories.transaction.logs.root']
RETURN name, value"""
# What names one thing inside a key, not its kind: uuids (Celery's task ids), hex ids
# (chunk and document ids, run suffixes such as bench-1a2b3c4d), numbers.
_ID = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]*\d[0-9a-f]*[a-f]\w*|\d+")


class Neo4jFiles:
    """The on-disk folders of a Neo4j server's default database, found by asking it."""

    def __init__(self, uri: str, database: str = "neo4j") -> None:
        with GraphDatabase.driver(uri) as driver, driver.session() as session:
            found = {r["name"]: r["value"] for r in session.run(SETTINGS)}
        self.database = Path(found["server.directories.data"]) / "databases" / database
        self.tx_logs = Path(found["server.directories.transaction.logs.root"]) / database

    def sizes(self) -> dict[str, int]:
        """Bytes now: `store` (records), `indexes` (schema/), `tx_logs`, and `all`."""
        indexes = _bytes(self.database / "schema")
        store = _bytes(self.database) - indexes
        logs = _bytes(self.tx_logs)
        return {"store": store, "indexes": indexes, "tx_logs": logs, "all": store + indexes + logs}


def _bytes(folder: Path) -> int:
    """Allocated bytes of every file under `folder` (0 when it does not exist)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:  # a log rotated or an index file merged meanwhile
                continue
    return total


def redis_used_memory(url: str) -> int:
    """`used_memory` of the Redis server (every database and client buffer), in bytes."""
    with redis.Redis.from_url(url) as client:
        return int(client.info("memory")["used_memory"])


def key_kind(key: str, prefix: str) -> str:
    """`cogmill:job:1f2e...:events` -> `job:*:events`: the kind of a key, without its ids."""
    parts = key.removeprefix(prefix).split(":")
    return ":".join(_ID.sub("*", part) for part in parts[:4])


def redis_keys(url: str, prefix: str, limit: int = 2_000_000) -> dict[str, dict[str, Any]]:
    """Keys under `prefix` by kind: how many, their bytes (`MEMORY USAGE`) and how many have
    no expiry; at most `limit` keys are walked (the rest are counted as `unwalked`)."""
    kinds: dict[str, dict[str, Any]] = defaultdict(lambda: {"keys": 0, "bytes": 0, "no_ttl": 0})
    walked = 0
    with redis.Redis.from_url(url) as client:
        keys = client.scan_iter(match=f"{prefix}*", count=1000)
        while batch := [k.decode() for _, k in zip(range(500), keys, strict=False)]:
            pipe = client.pipeline(transaction=False)
            for key in batch:
                pipe.memory_usage(key)
                pipe.ttl(key)
            answers = pipe.execute()
            for key, used, ttl in zip(batch, answers[::2], answers[1::2], strict=True):
                kind = kinds[key_kind(key, prefix)]
                kind["keys"] += 1
                kind["bytes"] += int(used or 0)
                kind["no_ttl"] += ttl == -1
            walked += len(batch)
            if walked >= limit:
                kinds["unwalked"]["keys"] = sum(1 for _ in keys)
                break
    return dict(sorted(kinds.items(), key=lambda item: -item[1]["bytes"]))


class Sampler:
    """Reads every named gauge every `every_s` seconds in a thread, between `with` and its end:
    `samples[name]` is a list of (seconds, value)."""

    def __init__(self, gauges: dict[str, Callable[[], float]], every_s: float) -> None:
        self.gauges, self.every_s = gauges, every_s
        self.samples: dict[str, list[tuple[float, float]]] = {name: [] for name in gauges}
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _run(self) -> None:
        while True:
            now = time.monotonic()
            try:
                for name, read in self.gauges.items():
                    self.samples[name].append((now, read()))
            except Exception as err:  # any gauge's failure, carried to the caller's thread
                self.error = err
                return
            if self._stop.wait(self.every_s):
                return

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.error is not None:
            raise RuntimeError(f"a gauge failed while sampling: {self.error}") from self.error
