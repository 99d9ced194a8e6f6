"""The Files + Batches part of the test LLM server (tests/llm_server.py): `POST /v1/files`
(multipart), `GET /v1/files/{id}/content`, `POST /v1/batches`, `GET /v1/batches/{id}`,
`POST /v1/batches/{id}/cancel` and `GET /v1/batches` (the list, with metadata).

A batch is in progress for `delay_seconds` after its creation (and, with `hold`, until the
test sets it False again), then completes, or expires with `expire` (answering nothing). Each
line is answered exactly as the chat route answers the same body (same deterministic
extraction, same usage), except a `failed_share` of them, drawn from (seed, custom_id), which
get an error object in the batch's error file. Lines are answered when a client first sees
the batch completed. `submissions` counts created batches; `refuse` answers uploads 404, as a
server without the Batch API does.
"""

from __future__ import annotations

import copy
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from email.parser import BytesParser
from email.policy import default as email_policy
from typing import Any

LINES_PATH = "/v1/batches/lines"  # where the answered lines' usage is tallied (server stats)


@dataclass
class BatchFaults:
    """How the Batch API behaves; change with `BatchBook.configure`."""

    delay_seconds: float = 0.0
    hold: bool = False  # every batch stays in progress while True: a gate the test releases
    expire: bool = False
    failed_share: float = 0.0
    seed: int = 0
    refuse: bool = False  # answer 404 to uploads, as a server without the Batch API does


class BatchBook:
    """The uploaded files and created batches of one test server."""

    def __init__(self, user_text: Callable[[dict[str, Any]], str]) -> None:
        self.user_text = user_text
        self.faults = BatchFaults()
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.submissions = 0
        self.cancelled = 0
        self.failed: set[str] = set()  # custom_ids answered with an error
        self.answered: set[str] = set()  # custom_ids answered with a reply

    def configure(self, **changes: Any) -> None:
        with self.lock:
            self.faults = BatchFaults(**{**asdict(self.faults), **changes})

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "submissions": self.submissions,
                "cancelled": self.cancelled,
                "lines": sum(b["request_counts"]["total"] for b in self.batches.values()),
                "answered": len(self.answered),
                "failed": sorted(self.failed),
                # In progress and not due yet (a due batch finishes when it is next read).
                "pending": sum(
                    1
                    for b in self.batches.values()
                    if b["status"] == "in_progress" and not self._due(b, self.faults)
                ),
            }

    @staticmethod
    def _due(batch: dict[str, Any], faults: BatchFaults) -> bool:
        return not faults.hold and time.time() - batch["_at"] >= faults.delay_seconds

    def route(self, handler: Any, method: str) -> bool:
        """Answer the request if it is a Files or Batches route; False otherwise."""
        path = handler.path.split("?", 1)[0].rstrip("/")
        if method == "POST" and path == "/v1/files" and self.faults.refuse:
            handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
            handler._error(404, "no route POST /v1/files")
        elif method == "POST" and path == "/v1/files":
            handler._json(200, self._upload(handler))
        elif method == "GET" and path.startswith("/v1/files/") and path.endswith("/content"):
            data = self.files.get(path.split("/")[3])
            if data is None:
                handler._error(404, f"no file {path}")
            else:
                _send(handler, data)
        elif method == "POST" and path == "/v1/batches":
            self._create(handler, handler._body())
        elif method == "POST" and path.startswith("/v1/batches/") and path.endswith("/cancel"):
            handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
            with self.lock:
                batch = self.batches.get(path.split("/")[3])
                if batch is not None and batch["status"] == "in_progress":
                    batch["status"] = "cancelled"
                    self.cancelled += 1
            if batch is None:
                handler._error(404, f"no batch {path}")
            else:
                handler._json(200, self._view(handler, batch["id"]))
        elif method == "GET" and path == "/v1/batches":
            with self.lock:
                ids = sorted(self.batches, key=lambda i: -self.batches[i]["created_at"])
            data = [self._view(handler, i) for i in ids]
            handler._json(200, {"object": "list", "data": data, "has_more": False})
        elif method == "GET" and path.startswith("/v1/batches/"):
            batch_id = path.split("/")[3]
            if batch_id not in self.batches:
                handler._error(404, f"no batch {batch_id}")
            else:
                handler._json(200, self._view(handler, batch_id))
        else:
            return False
        return True

    def _upload(self, handler: Any) -> dict[str, Any]:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        head = f"Content-Type: {handler.headers.get('Content-Type')}\r\n\r\n".encode()
        message = BytesParser(policy=email_policy).parsebytes(head + raw)
        data, purpose = b"", ""
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            if name == "file":
                data = payload
            elif name == "purpose":
                purpose = payload.decode()
        file_id = f"file-{uuid.uuid4().hex[:16]}"
        with self.lock:
            self.files[file_id] = data
        return _file(file_id, len(data), purpose)

    def _create(self, handler: Any, body: dict[str, Any]) -> None:
        input_id = body.get("input_file_id", "")
        data = self.files.get(input_id)
        if data is None:
            handler._error(400, f"no input file {input_id!r}")
            return
        total = sum(1 for line in data.splitlines() if line.strip())
        batch = {
            "id": f"batch_{uuid.uuid4().hex[:16]}",
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "completion_window": body.get("completion_window"),
            "input_file_id": input_id,
            "status": "in_progress",
            "created_at": int(time.time()),
            "metadata": body.get("metadata") or {},
            "output_file_id": None,
            "error_file_id": None,
            "request_counts": {"total": total, "completed": 0, "failed": 0},
            "_at": time.time(),
        }
        with self.lock:
            self.batches[batch["id"]] = batch
            self.submissions += 1
        handler._json(200, _public(batch))

    def _view(self, handler: Any, batch_id: str) -> dict[str, Any]:
        """The batch as it is now: finished (answered once) once due."""
        with self.lock:
            batch, faults = self.batches[batch_id], self.faults
            due = batch["status"] == "in_progress" and self._due(batch, faults)
            if due:
                batch["status"] = "finalizing"  # answered below, outside the lock
        if due:
            status = "expired" if faults.expire else "completed"
            outputs = self._answer(handler, batch, faults) if status == "completed" else ([], [])
            with self.lock:
                for kind, lines in zip(("output_file_id", "error_file_id"), outputs, strict=True):
                    if lines:
                        file_id = f"file-{uuid.uuid4().hex[:16]}"
                        self.files[file_id] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                        batch[kind] = file_id
                batch["request_counts"].update(completed=len(outputs[0]), failed=len(outputs[1]))
                batch["status"] = status
        with self.lock:
            view = _public(batch)
        if view["status"] == "finalizing":
            view["status"] = "in_progress"
        return view

    def _answer(
        self, handler: Any, batch: dict[str, Any], faults: BatchFaults
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Each line answered as the chat route would, or with an error (`failed_share`)."""
        done: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        for raw in self.files[batch["input_file_id"]].splitlines():
            if not raw.strip():
                continue
            line = json.loads(raw)
            custom_id = line["custom_id"]
            if random.Random(f"{faults.seed}:{custom_id}").random() < faults.failed_share:
                error = {"message": "the server had an error", "type": "server_error"}
                response = {"status_code": 500, "body": {"error": error}}
                failed.append(
                    {
                        "id": f"r-{custom_id[:12]}",
                        "custom_id": custom_id,
                        "response": response,
                        "error": None,
                    }
                )
                with self.lock:
                    self.failed.add(custom_id)
                continue
            status, reply = _chat_reply(handler, line["body"], self.user_text(line["body"]))
            done.append(
                {
                    "id": f"r-{custom_id[:12]}",
                    "custom_id": custom_id,
                    "error": None,
                    "response": {"status_code": status, "body": reply},
                }
            )
            with self.lock:
                self.answered.add(custom_id)
        return done, failed


def _chat_reply(handler: Any, body: dict[str, Any], text: str) -> tuple[int, dict[str, Any]]:
    """What the server's chat route answers `body` (its usage tallied under LINES_PATH)."""
    line = copy.copy(handler)  # the chat route's own code, writing into a list
    captured: list[tuple[int, dict[str, Any]]] = []
    line.path = LINES_PATH
    line._json = lambda status, payload, headers=None: captured.append((status, payload))
    line._chat(body, text, malformed=False)
    return captured[0]


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in batch.items() if not k.startswith("_")}


def _file(file_id: str, size: int, purpose: str) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": "requests.jsonl",
        "purpose": purpose,
        "status": "processed",
    }


def _send(handler: Any, data: bytes) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/octet-stream")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
