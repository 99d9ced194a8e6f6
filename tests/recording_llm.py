"""The test LLM server, keeping the messages of every chat request it is sent (for tests that
read the prompts a search made)."""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.llm_server import LLMTestServer, _Handler


class RecordingLLMServer(LLMTestServer):
    """The test LLM server, keeping the messages of every chat request it is sent."""

    def __init__(self, **faults: Any) -> None:
        super().__init__(**faults)
        self.prompts: list[str] = []
        prompts, lock = self.prompts, threading.Lock()

        class Recording(_Handler):
            def _model_call(self, body: dict[str, Any]) -> None:
                if self.path.endswith("/chat/completions"):
                    with lock:
                        prompts.append(json.dumps(body.get("messages"), ensure_ascii=False))
                super()._model_call(body)

        self._server.RequestHandlerClass = Recording
