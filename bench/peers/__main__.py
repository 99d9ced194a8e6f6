"""Peer comparison: cogmill, LightRAG and cognee on the same first N MuSiQue passages.

    bash bench/peers/setup.sh                                  # once: .venv-peers/ (pinned)
    nice -n 19 .venv/bin/python -m bench.peers --passages 300

Each system runs in a subprocess of its own venv (cogmill in .venv, the peers in
.venv-peers/<name>), one after the other, each against a stand-in server process of its own
(bench/peers/standin.py: tests/llm_server.py taught the peers' reply formats), so every system
gets the same instant LLM answers (the same graph per passage) and the same embeddings.
Ingestion is timed from before `add` to the end of indexing; query latency is retrieval only,
over the same questions, after one untimed warm-up question.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from retrieval.evaluation import BenchDataError, default_data_dir, load_bench  # noqa: E402

HERE = Path(__file__).resolve().parent
PEERS_VENV = ROOT / ".venv-peers"
SYSTEMS = ("cogmill", "lightrag", "cognee")
NOTES = """\
What each figure includes:
  ingest wall s   from before `add` of the first passage to the end of indexing: cogmill add +
                  cognify (in-process Celery worker) + optimize() of the vector index; LightRAG
                  ainsert (chunk, extract, merge, embed, write its JSON/NanoVectorDB/NetworkX
                  files); cognee add + cognify (its default pipeline and stores).
  ingest CPU s    user + system CPU of the system's process and every process it spawned in that
                  window (threads included; /proc and os.times()); not the stand-in's.
  stand-in CPU s  the stand-in server's CPU answering that system's ingestion (another process;
                  it grows with the number and size of the calls the system makes).
  LLM / embed     requests the system sent to the stand-in during ingestion.
  query p50/p95   wall ms per question in the system's process, retrieval only (no answer
                  generation): cogmill search() GRAPH_PPR and CHUNKS, top 10; LightRAG aquery
                  only_need_context, modes mix and naive (mix includes its keyword LLM call);
                  cognee search(only_context=True), GRAPH_COMPLETION and CHUNKS.
                  Nearest-rank percentiles over the same questions, after one warm-up.
  entities        entity nodes the system stored; peak RSS: the system's process (+ children).
  load 5m         the machine's 5-minute load average before / after the system's run: other
                  work on the machine inflates wall times and latencies, CPU seconds far less.
The stand-in answers instantly, so the figures are each system's own cost, not a model's."""


def questions(bench_passages: int, data: Path, count: int) -> tuple[list[str], str]:
    """`count` questions (those answerable from the first passages first) and a warm-up one."""
    bench = load_bench("musique", data)
    first = [q.text for q in bench.limited(bench_passages).questions]
    rest = [q.text for q in bench.questions if q.text not in set(first)]
    chosen = list(dict.fromkeys(first + rest))[: count + 1]
    return chosen[:count], chosen[count]


def write_input(args: argparse.Namespace, path: Path) -> None:
    bench = load_bench("musique", args.data)
    passages = [
        {"name": bench.file_name(i), "text": f"{p.title}\n{p.text}"}
        for i, p in enumerate(bench.passages[: args.passages])
    ]
    asked, warmup = questions(args.passages, args.data, args.questions)
    data = {
        "passages": passages,
        "questions": asked,
        "warmup_question": warmup,
        "embedding_dim": args.embedding_dim,
    }
    path.write_text(json.dumps(data))


def start_standin(
    system: str, args: argparse.Namespace, log: Path
) -> tuple[subprocess.Popen[str], str, int]:
    command = [
        sys.executable,
        "-m",
        "bench.peers.standin",
        "--format",
        system,
        "--embedding-dim",
        str(args.embedding_dim),
    ]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if len(line) != 3 or line[0] != "listening":
        proc.kill()
        raise SystemExit(f"the stand-in server did not start; see {log}")
    return proc, line[1], int(line[2])


TIKTOKEN_FILE = PEERS_VENV / "tiktoken-cache" / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"


def python_for(system: str) -> Path | None:
    """The system's interpreter, or None when setup.sh has not made its venv (or the tiktoken
    file both peers need offline)."""
    if system == "cogmill":
        return Path(sys.executable)
    python = PEERS_VENV / system / "bin" / "python"
    return python if python.exists() and TIKTOKEN_FILE.exists() else None


def run_system(system: str, args: argparse.Namespace, work: Path) -> dict[str, object]:
    """One system's run in its venv, against a stand-in process of its own."""
    python = python_for(system)
    if python is None:
        return {"system": system, "error": "not installed: run `bash bench/peers/setup.sh`"}
    standin, url, pid = start_standin(system, args, work / f"standin-{system}.log")
    load = os.getloadavg()[1]
    try:
        result = _run(system, python, work, url, pid, args.timeout)
    finally:
        standin.terminate()
        standin.wait(30)
    # The machine's 5-minute load average over the run: other work inflates wall times.
    result["load_5m"] = [round(load, 1), round(os.getloadavg()[1], 1)]
    return result


def _run(
    system: str, python: Path, work: Path, url: str, pid: int, timeout: float
) -> dict[str, object]:
    folder = work / system
    folder.mkdir()
    out, log = work / f"{system}.json", work / f"{system}.log"
    script = (
        ["-m", "bench.peers.run_cogmill"]
        if system == "cogmill"
        else [str(HERE / f"run_{system}.py")]
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(TIKTOKEN_FILE.parent)}
    command = [
        str(python),
        *script,
        "--input",
        str(work / "input.json"),
        "--work",
        str(folder),
        "--standin",
        url,
        "--standin-pid",
        str(pid),
        "--out",
        str(out),
    ]
    print(f"running {system} ... (log: {log})", file=sys.stderr, flush=True)
    try:
        with log.open("w") as stderr:
            done = subprocess.run(
                command,
                cwd=ROOT,
                env=env,
                stdout=stderr,
                stderr=stderr,
                timeout=timeout,
                check=False,
            )
    except subprocess.TimeoutExpired:
        return {"system": system, "error": f"timed out after {timeout:.0f} s; see {log}"}
    if done.returncode != 0 or not out.exists():
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        return {"system": system, "error": f"exit {done.returncode}: {' | '.join(tail)}"}
    return json.loads(out.read_text())


def table(results: list[dict[str, object]], passages: int) -> str:
    base = next((r for r in results if r["system"] == "cogmill" and "error" not in r), None)
    lines = [
        f"{passages} MuSiQue passages, instant stand-in LLM and embeddings",
        f"{'system':<9} {'ingest wall s':>13} {'ingest CPU s':>12} {'x cogmill':>9} "
        f"{'stand-in CPU s':>14} {'LLM':>6} {'embed':>6} {'entities':>8} {'peak RSS MiB':>12} "
        f"{'load 5m':>9}",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"{r['system']:<9} not run: {r['error']}")
            continue
        ing, served = r["ingest"], r["standin"]
        ratio = ing["cpu_s"] / base["ingest"]["cpu_s"] if base else float("nan")
        lines.append(
            f"{r['system']:<9} {ing['wall_s']:>13.1f} {ing['cpu_s']:>12.1f} {ratio:>8.1f}x "
            f"{served['cpu_s']:>14.1f} {served['chat_calls']:>6} {served['embedding_calls']:>6} "
            f"{r['graph'].get('entities', 0):>8} {r['peak_rss_mib']:>12.0f} "
            f"{'/'.join(map(str, r['load_5m'])):>9}"
        )
    lines.append("")
    lines.append(f"{'system':<9} {'query mode':<18} {'p50 ms':>8} {'p95 ms':>8} {'empty':>6}")
    for r in results:
        for mode, q in r.get("queries", {}).items():
            lines.append(
                f"{r['system']:<9} {mode:<18} {q['p50_ms']:>8.1f} {q['p95_ms']:>8.1f} "
                f"{q['empty']:>6}"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=300, help="the first N passages")
    parser.add_argument("--questions", type=int, default=20, help="timed questions")
    parser.add_argument("--data", type=Path, default=default_data_dir(), help="bench folder")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--embedding-dim", type=int, default=384)
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per system")
    parser.add_argument("--keep", type=Path, help="keep stores, logs and JSON here")
    args = parser.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if unknown := set(systems) - set(SYSTEMS):
        parser.error(f"unknown systems {sorted(unknown)}; choose from {', '.join(SYSTEMS)}")
    if args.passages < 1 or args.questions < 1:
        parser.error("--passages and --questions must be at least 1")
    if args.keep and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep} is not empty; name a new or empty folder")
    try:
        load_bench("musique", args.data)
    except BenchDataError as err:
        parser.error(str(err))
    with tempfile.TemporaryDirectory(prefix="cogmill-peers-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        write_input(args, work / "input.json")
        results = [run_system(s, args, work) for s in systems]
    print(json.dumps(results, indent=2))
    print()
    print(table(results, args.passages))
    print()
    print(NOTES)


if __name__ == "__main__":
    main()
