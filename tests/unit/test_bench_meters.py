"""The distributed bench's meters and corpora (bench/processes.py, bench/corpora.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench import corpora, processes

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def _data(folder: Path) -> Path:
    folder.mkdir()
    musique = [{"title": f"Mount M{i}", "text": f"Mount M{i} is in Nowhere."} for i in range(3)]
    wiki = [{"title": f"Lake W{i}", "text": f"Lake W{i} feeds Mount M0."} for i in range(4)]
    wiki.append(dict(musique[0]))  # a passage both corpora hold counts once
    (folder / "musique_train_corpus.json").write_text(json.dumps(musique))
    (folder / "2wiki_corpus.json").write_text(json.dumps(wiki))
    return folder


def test_corpora_are_the_pool_then_renamed_generations_of_it(tmp_path: Path) -> None:
    pool = corpora.pool(_data(tmp_path / "data"))
    assert [p.source for p in pool] == ["musique"] * 3 + ["2wiki"] * 4
    four = corpora.corpus(3, 2, pool)  # 3x a base of 2: musique, then 2wiki
    assert corpora.describe(four) == "6 passages: 3 musique + 3 2wiki, all distinct"
    assert four == pool[:6], "within the pool the passages are the originals"
    ten = corpora.corpus(10, 2, pool)
    assert corpora.describe(ten) == (
        "20 passages: 3 musique + 4 2wiki; 13 renamed (generations 1-2)"
    )
    assert [p.generation for p in ten] == [0] * 7 + [1] * 7 + [2] * 6
    assert ten[7].source == "musique" and ten[7].text != pool[0].text
    paths = corpora.write(tmp_path, ten, "run-a")
    texts = [p.read_text() for p in paths]
    assert len(set(texts)) == 20, "a renamed passage must differ from its original"
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
