"""Running the async LLM client from synchronous code, on one event loop per process.

Celery worker threads, API threads and the CLI are synchronous; `LLMClient` is async. Every
LLM call of a process runs on one background event loop, which the calling threads block on:
- the calls of all the batches a process works on share one pool of in-flight slots
  (`LLMClient(max_in_flight=...)`), so a batch that is down to its last calls leaves its slots
  to the others instead of idling them; slots are granted in arrival order, so batches finish
  one after another and their writes overlap the remaining calls;
- the HTTP client, its TLS context and its keep-alive connections are built once per process
  instead of once per call (which cost about 5% of a worker's CPU at high rates); on this loop
  the SDK sends over aiohttp, which costs half the CPU per call of its httpx default.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import os
import threading
import urllib.request
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx
import openai

T = TypeVar("T")

# Threads for blocking work the calls hand off (the response cache in the state store).
_EXECUTOR_THREADS = 32

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pid = 0
# The HTTP clients made for the loop, closed on it when the process exits.
_clients: list[httpx.AsyncClient] = []


def _background_loop() -> asyncio.AbstractEventLoop:
    """The process's LLM loop, started on first use (and again in a forked child)."""
    global _loop, _thread, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            loop.set_default_executor(
                concurrent.futures.ThreadPoolExecutor(_EXECUTOR_THREADS, "cogmill-llm-io")
            )
            thread = threading.Thread(target=loop.run_forever, name="cogmill-llm-loop", daemon=True)
            thread.start()
            _loop, _thread, _pid = loop, thread, os.getpid()
            _clients.clear()  # a forked child's copies belong to its parent's loop
        return _loop


def http_client(timeout: float) -> httpx.AsyncClient | None:
    """The HTTP client for an SDK client made on the running loop, or None for the SDK's own.

    On the process's LLM loop: the SDK's aiohttp-based client, closed at exit. With 16 calls in
    flight, httpx's connection pool checks every connection for every request, and a call cost
    the calling process 3.4 CPU-ms against 1.6 over aiohttp (1,000 extraction calls to
    tests/llm_server.py). Its httpx-based client when the environment names a proxy, which only
    httpx honours. None on a caller's own loop, whose end nobody announces.
    """
    with _lock:
        if _loop is None or asyncio.get_running_loop() is not _loop:
            return None
        proxied = set(urllib.request.getproxies()) - {"no"}
        make = openai.DefaultAsyncHttpxClient if proxied else openai.DefaultAioHttpClient
        client = make(timeout=timeout)
        _clients.append(client)
        return client


@atexit.register
def _close_clients() -> None:
    """Close the loop's HTTP clients, so that exiting prints no unclosed-session warnings."""
    loop, clients = _loop, list(_clients)
    if loop is None or _pid != os.getpid() or not loop.is_running():
        return
    for client in clients:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(client.aclose(), loop).result(timeout=5)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on the process's LLM loop and wait for its result.

    If the waiting thread is interrupted (a task time limit, a shutdown), the coroutine is
    cancelled rather than left running. Raises RuntimeError when called from the loop itself.
    """
    loop = _background_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError("run_sync was called on the LLM loop itself; await the coroutine")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise
