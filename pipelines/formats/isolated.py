"""Parsing in a child process, so that no document can hold a worker for longer than a bound.

The structural parsers (pdfminer, `unstructured` for markdown and HTML, the office readers,
the standard library's e-mail parser) have inputs on which they take time out of all
proportion to the file: an e-mail whose Subject is 448 KB of encoded words takes 23 CPU-s
(the header parser is quadratic in it), and a few megabytes would take hours. A thread
cannot be stopped, a process can: `IsolatedParsers.partition` runs the partitioner in a
child process and kills it once the document's deadline passes, which the caller reports as
that document's problem.

A child serves one document at a time and is kept for the next (starting an interpreter and
importing the parsers costs about a second), so there are as many children as threads that
parsed at once. A child ends when its parent's pipe closes, when it notices that its parent
has gone, or after a minute without a document. Requests go to the child pickled (the
parent trusts itself); answers come back as JSON, so a parser subverted by a crafted file
cannot run code in the worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import select
import struct
import subprocess
import threading
import time
from typing import IO, Any

from core import cancellation
from core.child_process import module_command
from pipelines.formats.base import DocumentProblem, Partitioner, Source
from pipelines.models import Element

# Formats read by a third-party or standard-library structural parser; text, records and
# code are read by our own streaming code, in time proportional to their size.
ISOLATED_KINDS = frozenset({"pdf", "docx", "pptx", "xlsx", "eml", "html", "md"})
_HEADER = struct.Struct("!Q")
_READY = b"ready"
_START_TIMEOUT_S = 120.0  # for the child's interpreter and imports, not a document's time
_PARENT_POLL_S = 1.0
# While a child parses, the parent asks this often whether the job was cancelled.
_CANCEL_POLL_MS = 250
# A child waiting this long for a document exits (its parsers hold ~190 MiB once markdown or
# HTML was read); the parent reuses only children idle for less, with a margin.
_IDLE_EXIT_S = 60.0
_IDLE_REUSE_S = 45.0


class _Late(Exception):
    """The child did not answer before the deadline."""


class _Ended(Exception):
    """The child's pipe closed: it exited or was killed."""


def unparsable(kind: str, err_type: str, err: str) -> DocumentProblem:
    """A parser's own exception, as the problem of the document it failed on."""
    return DocumentProblem(
        f"could not parse this {kind} document ({err_type}: {err}); "
        "check the file, or save it as .txt to ingest it as plain text"
    )


class _Child:
    """One parser process and its two pipes."""

    def __init__(self) -> None:
        command, env = module_command("pipelines.formats.isolated")
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.fd = self.proc.stdout.fileno()
        self.idle_since = time.monotonic()
        try:
            ready = self.read(time.monotonic() + _START_TIMEOUT_S)
        except cancellation.Cancelled:
            self.kill()
            raise
        except (_Late, _Ended) as err:
            self.kill()
            raise RuntimeError(
                f"the document parser process did not start (exit code {self.proc.returncode});"
                " see the worker's log above"
            ) from err
        if ready != _READY:
            self.kill()
            raise RuntimeError(f"the document parser process answered {ready[:40]!r} at start")

    def send(self, request: bytes) -> None:
        self.stdin.write(_HEADER.pack(len(request)) + request)
        self.stdin.flush()

    def read(self, deadline: float) -> bytes:
        (size,) = _HEADER.unpack(self._read_exactly(_HEADER.size, deadline))
        return self._read_exactly(size, deadline)

    def _read_exactly(self, size: int, deadline: float) -> bytes:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        data = bytearray()
        while len(data) < size:
            left_ms = (deadline - time.monotonic()) * 1000
            if left_ms <= 0:
                raise _Late
            if not poller.poll(max(1, int(min(left_ms, _CANCEL_POLL_MS)))):
                cancellation.check()  # the caller's except clause kills the child
                continue
            part = os.read(self.fd, min(size - len(data), 1 << 20))
            if not part:
                raise _Ended
            data += part
        return bytes(data)

    def kill(self) -> int:
        """Ends the child at once; returns its exit code (negative: the signal)."""
        self.proc.kill()
        # A request still buffered for a child that died cannot be flushed: dropped here.
        with contextlib.suppress(BrokenPipeError):
            self.stdin.close()
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return self.proc.wait()


class IsolatedParsers:
    """Idle parser processes, shared by the threads of one worker process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Child] = []
        self._pid = os.getpid()

    def partition(
        self, partitioner: Partitioner, kind: str, source: Source, timeout_s: float
    ) -> list[Element]:
        """The partitioner's elements for `source`, computed in a child process within
        `timeout_s` seconds. Raises DocumentProblem when the document is the problem: it is
        refused, fails to parse, or takes too long."""
        request = pickle.dumps((partitioner, source))
        deadline = time.monotonic() + timeout_s
        child, reused = self._take()
        while True:
            try:
                child.send(request)
                answer = json.loads(child.read(deadline))
                break
            except (_Ended, OSError) as err:
                code = child.kill()
                if reused:  # it died while idle (it can still look alive): not this document
                    child, reused = _Child(), False
                    continue
                if isinstance(err, OSError):
                    raise
                raise DocumentProblem(
                    f"the parser of this {kind} document ended abnormally (exit code {code}: "
                    "a crash or out of memory); check the file, or save its text as .txt"
                ) from None
            except _Late:
                child.kill()
                raise DocumentProblem(
                    f"parsing this {kind} document took longer than {timeout_s:g} s and was "
                    "stopped; split it into smaller files, save its text as .txt, or raise the "
                    "limit (COGMILL_PARSE_TIMEOUT_SECONDS)"
                ) from None
            except BaseException:  # cancelled, or interrupted (a time limit): leave no child
                child.kill()
                raise
        self._give_back(child)
        if "problem" in answer:
            raise DocumentProblem(answer["problem"])
        if "error" in answer:
            raise unparsable(kind, answer["error"], answer["message"])
        return [Element(kind=k, text=t) for k, t in answer["elements"]]

    def _take(self) -> tuple[_Child, bool]:
        """An idle child (and True), or a new one (and False)."""
        with self._lock:
            if self._pid != os.getpid():  # a forked worker: the children are the parent's
                self._idle, self._pid = [], os.getpid()
            fresh = time.monotonic() - _IDLE_REUSE_S
            usable = [c for c in self._idle if c.idle_since > fresh and c.proc.poll() is None]
            ended = [c for c in self._idle if c not in usable]  # exited, or about to
            self._idle = usable
            child = self._idle.pop() if self._idle else None
        for old in ended:
            old.kill()
        return (child, True) if child else (_Child(), False)

    def _give_back(self, child: _Child) -> None:
        child.idle_since = time.monotonic()
        with self._lock:
            if self._pid == os.getpid():
                self._idle.append(child)

    def close(self) -> None:
        """Ends the idle children (those parsing end when their document does)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for child in idle:
            child.kill()


PARSERS = IsolatedParsers()


def _answer(request: bytes) -> dict[str, Any]:
    partitioner, source = pickle.loads(request)
    try:
        elements = partitioner(source)
    except DocumentProblem as err:
        return {"problem": str(err)}
    except Exception as err:  # a parser failing on a document is that document's problem
        return {"error": type(err).__name__, "message": str(err)}
    return {"elements": [[e.kind, e.text] for e in elements]}


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_PARENT_POLL_S)
    os._exit(1)


def _receive(size: int) -> bytes:
    """`size` bytes from stdin; b"" when it closed or no request came for _IDLE_EXIT_S."""
    data = bytearray()
    while len(data) < size:
        if not data and not select.select([0], [], [], _IDLE_EXIT_S)[0]:
            return b""
        part = os.read(0, size - len(data))
        if not part:
            return b""
        data += part
    return bytes(data)


def main() -> None:
    """The child: answers requests on stdin until it closes or stays quiet."""
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a parser's prints go to the log, not into the answers
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    # The isolated kinds' partitioners, imported before any document's clock runs.
    from pipelines.formats import mail, markup, office, pdf  # noqa: F401

    answers.write(_HEADER.pack(len(_READY)) + _READY)
    answers.flush()
    while header := _receive(_HEADER.size):
        (size,) = _HEADER.unpack(header)
        if not (request := _receive(size)):
            break
        data = json.dumps(_answer(request)).encode()
        answers.write(_HEADER.pack(len(data)) + data)
        answers.flush()


if __name__ == "__main__":
    main()
