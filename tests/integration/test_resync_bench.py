"""bench/resync.py runs (a smoke run on a tiny corpus): an unchanged re-sync cognifies nothing,
a touched folder is hashed again and found unchanged, an edited file alone is cognified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llm_server import LLMTestServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_the_resync_bench_runs_and_an_unchanged_folder_costs_little(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    passages = [
        {"title": f"Town {i}", "text": f"Town {i} lies on River {i % 3}."} for i in range(8)
    ]
    (data / "musique_train_corpus.json").write_text(json.dumps(passages))
    (data / "2wiki_corpus.json").write_text("[]")
    (data / "hotpotqa_train_corpus.json").write_text("{}")
    with LLMTestServer() as llm:
        env = {**os.environ, "COGMILL_LLM_BASE_URL": llm.base_url, "COGMILL_LLM_MODEL": "test"}
        command = [sys.executable, str(ROOT / "bench" / "resync.py"), "--data", str(data), "--json"]
        done = subprocess.run(
            command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600
        )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["files"] == 8 and result["first"]["cognified"] == 8
    for again in ("unchanged", "touched"):
        assert result[again]["report"]["unchanged"] == 8 and result[again]["cognified"] == 0
    assert result["edited"]["report"]["replaced"] == 1 and result["edited"]["cognified"] == 1
    assert result["ratio_unchanged"] < 1
