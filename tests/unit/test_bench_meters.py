"""The distributed bench's meters and corpora (bench/processes.py, bench/corpora.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # last: bench/ modules shadow nothing

import corpora  # noqa: E402
import processes  # noqa: E402

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def _data(folder: Path) -> Path:
    folder.mkdir()
    musique = [{"title": f"M{i}", "text": f"musique {i}"} for i in range(3)]
    wiki = [{"title": f"W{i}", "text": f"wiki {i}"} for i in range(4)]
    wiki.append(dict(musique[0]))  # a passage both corpora hold counts once
    hotpot = {"H0": ["one.", " two."], "H1": ["three."]}
    (folder / "musique_train_corpus.json").write_text(json.dumps(musique))
    (folder / "2wiki_corpus.json").write_text(json.dumps(wiki))
    (folder / "hotpotqa_train_corpus.json").write_text(json.dumps(hotpot))
    return folder


def test_corpora_are_distinct_until_the_pool_runs_out(tmp_path: Path) -> None:
    pool = corpora.pool(_data(tmp_path / "data"))
    assert [p.source for p in pool] == ["musique"] * 3 + ["2wiki"] * 4 + ["hotpotqa"] * 2
    assert pool[-2].text == "one.  two."
    four = corpora.corpus(3, 2, pool)  # 3x a base of 2: musique, then 2wiki
    assert corpora.describe(four) == "6 passages: 3 musique + 3 2wiki, all distinct"
    ten = corpora.corpus(10, 2, pool)
    assert corpora.describe(ten) == (
        "20 passages: 3 musique + 4 2wiki + 2 hotpotqa; 11 tagged repeats of those"
    )
    paths = corpora.write(tmp_path, ten, "run-a")
    texts = [p.read_text() for p in paths]
    assert len(set(texts)) == 20, "a repeat must differ from its original (the LLM cache)"
    (tmp_path / "b").mkdir()
    again = corpora.write(tmp_path / "b", ten, "run-b")
    assert not set(texts) & {p.read_text() for p in again}, "runs must not share a text"


def test_pool_names_a_missing_corpus(tmp_path: Path) -> None:
    try:
        corpora.pool(tmp_path)
    except SystemExit as err:
        assert "2wiki_corpus.json" in str(err)
    else:
        raise AssertionError("an empty data folder must be refused")


def test_cpu_of_a_process_tree_counts_its_children() -> None:
    # A parent that starts a child burning 0.6 s of CPU, then waits without burning any.
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', {BURN.format(s=60)!r}])\n"
            "time.sleep(60)",
        ],
    )
    try:
        deadline = time.monotonic() + 60
        while processes.tree_cpu_s(parent.pid) < 0.6 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert processes.tree_cpu_s(parent.pid) >= 0.6
        assert processes.cpu_s(parent.pid) < 0.5, "the parent itself only sleeps"
        assert len(processes.descendants(parent.pid)) == 1
    finally:
        for child in processes.descendants(parent.pid):
            os.kill(child, 9)
        parent.kill()
        parent.wait()
    assert processes.cpu_s(parent.pid) == 0.0, "a reaped process reads 0"


def test_listening_pid_finds_this_process() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        assert processes.listening_pid(port) is None, "bound but not listening"
        sock.listen()
        assert processes.listening_pid(port) == os.getpid()


def test_snapshot_windows_subtract() -> None:
    burnt = [0.0]
    first = processes.snapshot({"me": lambda: burnt[0]})
    burnt[0] = 1.5
    window = processes.snapshot({"me": lambda: burnt[0]}).since(first)
    assert window.cpu == {"me": 1.5}
    assert window.wall_s >= 0
    assert len(window.load) == 2
